"""The admission webhook adapter: HTTPS transport (`server`) and queue sources (`queues`).

The decisions live in `statemachines.admission`; this package only moves
AdmissionReview JSON over TLS and fetches the queues the rules need.
"""
