"""The references every framework is checked against: built-in models and user models."""
