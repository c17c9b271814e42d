"""Many ranks' reports of one run -> one report."""
