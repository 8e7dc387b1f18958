"""The campaign world kit: role-play under social pressure, with a facilitator and seeded dice."""
