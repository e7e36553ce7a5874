//! Pipelined collectives (ring, recursive doubling, Rabenseifner, broadcast) over `gaspi`. Not built yet: see the allreduce issue.
