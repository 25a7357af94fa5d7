"""Deployment: the production stack, Prefect deployments and the doctor that checks them."""
