//! Data-parallel libtorch trainer over `fusion` + `allreduce`. Not built yet: see the trainer issue.
