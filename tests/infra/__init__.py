"""Smoke tests that prove the provisioned infrastructure is real and cleans up after itself."""
