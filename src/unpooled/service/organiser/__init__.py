"""The organiser console: alerts, annotation progress and cost, settings, the lifecycle, quotas, releases."""
