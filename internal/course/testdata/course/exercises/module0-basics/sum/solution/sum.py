def s(): pass
