"""Stage 3: who is who in the job. Roles and labels (``roles``,
``process_facts``), connected ranks and the rank the others wait for (``collective``), what the
job itself said (NCCL RAS: ``nccl_ras``, ``ras``) and ranks grouped by stack the way STAT does
(``stack_groups``). May import vocab and accumulate."""
