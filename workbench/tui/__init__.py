"""The Textual face. Only this package (and ``workbench.cli``'s TUI entry) imports textual."""
