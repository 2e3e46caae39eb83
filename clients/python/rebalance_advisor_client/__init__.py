"""Client helper for manual-assign consumers that follow rebalance-advisor's published assignments."""
