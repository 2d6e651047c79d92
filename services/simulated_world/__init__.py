"""A simulated world over HTTP: ERP, suppliers, the manager's inbox, fault injection."""
