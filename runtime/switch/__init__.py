"""Switching the running agent to a rebuilt session, and every record of it.

store/state (one state table, atomic records) → ops (the Operations API) → schedule (the Stop
hook's decision) → worker → job, rebuild / rollback / recover (the jobs) → activation, health
(evidence the new process hears every channel), restart, housekeeping.
"""
