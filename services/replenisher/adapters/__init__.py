"""httpx adapters for the outside world: ERP, suppliers, the manager's inbox."""
