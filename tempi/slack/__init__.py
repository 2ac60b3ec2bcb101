"""`tempi slack`: pi's Slack bot mom, on Temporal."""
