"""Memorisation lab: tiny single-pass language models with counterfactual twins.
"""
