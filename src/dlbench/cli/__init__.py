"""The command line: grammar (parser), dispatch (main), commands, and terminal output."""
