"""Study reports: the seed articles' tables and the serving and sweep studies,
rebuilt from stored results (study holds the table every study builds)."""
