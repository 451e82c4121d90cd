//! Windows native commands (stub).
