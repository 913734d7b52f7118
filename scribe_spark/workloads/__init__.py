"""What experiments feed the protocols: rings and networks, popularity laws, subscriptions, failure schedules."""
