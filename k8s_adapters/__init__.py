"""The only package that talks to Kubernetes. It imports no other project app."""
