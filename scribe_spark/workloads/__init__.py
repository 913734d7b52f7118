"""What experiments feed the protocols: rings, networks, popularity laws, subscriptions, failure schedules."""
