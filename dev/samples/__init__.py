"""Stripe-shaped sample events for local runs (`events send`, the demo), and their delivery."""
