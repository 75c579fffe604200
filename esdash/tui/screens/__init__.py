"""The dashboard's screens: home (sessions, runs, plugins), live (one run), compare (two runs)."""
