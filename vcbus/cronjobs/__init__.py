"""The CronJob adapter's parts: time zones read from the system tz database into data (`zonedata`)."""
