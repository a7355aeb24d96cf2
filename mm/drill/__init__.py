"""`mm drill`: a disaster-recovery drill's accounting (pure) and its report."""
