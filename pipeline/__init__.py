"""Hermod data pipeline jobs (Spark): `analyse`."""
