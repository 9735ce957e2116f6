"""How accurate a run is: a stratified sample of pairs, design-based estimators, and what ``eval`` measures."""
