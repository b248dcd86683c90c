"""Features for sampled training: VIP analysis (which remote vertices a rank will need), cache policies, and the
tiered feature store."""
