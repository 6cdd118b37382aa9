"""The run's surroundings: the memory budget (limits), signals and exit statuses (ending),
files read (reading) and written (writing), and the home directory (home).
"""
