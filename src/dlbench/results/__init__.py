"""Result and Run records, the environment fingerprint, files and the store."""
