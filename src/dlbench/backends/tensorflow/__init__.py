"""TensorFlow / Keras: eager, tf.function, XLA and Keras fit."""
