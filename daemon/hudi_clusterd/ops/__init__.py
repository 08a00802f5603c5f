"""Table operations that compose the domain, storage and engine: schedule, execute, roll back."""
