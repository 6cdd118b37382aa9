"""Learned projections: W_Q, W_K and W_V and the RNN's weights as .npz files (projections), the
training objectives and loop (train), and learning by backpropagation (learn).
"""
