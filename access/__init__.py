"""Who pays, what it entitles them to, and how an event changes it: plain data and pure rules.

`model` holds the entities (an account that pays, its grants, its purchases, the state the
access cycle reads), `changes` turns each Stripe event into plain changes through one table,
and `decide` folds a batch of changes over the state into a plan: the rows to write and what
to announce. The access subscriber (`access.subscriber`) runs them in one cycle.
"""
