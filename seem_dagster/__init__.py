"""SEEM memory as a Dagster pipeline."""
