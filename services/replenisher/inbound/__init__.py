"""The inbound endpoint: how outside parties (suppliers, the warehouse, the manager's inbox)
reach a SKU's address without Restate's ingress. See `app.py`."""
