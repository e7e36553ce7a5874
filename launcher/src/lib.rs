//! The `tarantella` launcher. Not built yet: see the launcher issue.
