"""Communication: halo plan and halo-row exchange between ranks. Knows nothing of models."""
