"""The clock's door: APScheduler jobs (digests, follow-ups of open incidents).

Each job owns its unit of work; a job runs once per schedule across replicas.
"""
