"""A saga as the ledger keeps it: its state, a fold of its events (``state``); what a saga id
may be (``saga_ids``); the lease a process runs it under (``lease``); the messages it
commits with its changes (``outbox``); why it stands where it does, as an agent is told
(``agent_reasons``); where a step's call stands (``call_state``) and the progress it
reports (``progress``); retries come due (``overdue``)."""
