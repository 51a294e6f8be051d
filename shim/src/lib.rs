//! MySQL front end (skeleton).
