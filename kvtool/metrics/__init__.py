"""What running engines say on /metrics, read by metric family, beside the plan. Pure."""
