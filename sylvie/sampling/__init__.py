"""Minibatches of sampled neighbourhoods over the replicated topology (sampled training, SALIENT++)."""
