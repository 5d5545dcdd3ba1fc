"""A short tour of jax_dataclasses: a tiny MLP whose parameters are pytree dataclasses.

Run it with `python3 dev.py tour`. It builds a model, runs a jitted forward pass, takes the
gradient of an MSE loss with respect to the whole model, applies one SGD step with
`jax.tree.map`, vmaps over a batch, edits the model with `jdc.replace`, and does validated
"model surgery" on a copy with `jdc.copy_and_mutate`.
"""

from collections.abc import Callable

import jax
import jax.numpy as jnp

import jax_dataclasses as jdc

ACTIVATIONS: dict[str, Callable[[jax.Array], jax.Array]] = {
    "tanh": jnp.tanh,
    "relu": jax.nn.relu,
    "identity": lambda x: x,
}


@jdc.pytree_dataclass
class Layer:
    w: jax.Array
    b: jax.Array
    activation: jdc.Static[str] = "tanh"  # static: part of the tree structure, not traced

    def __call__(self, x: jax.Array) -> jax.Array:
        return ACTIVATIONS[self.activation](x @ self.w + self.b)


@jdc.pytree_dataclass
class MLP:
    layers: list[Layer]
    name: jdc.Static[str]

    def __call__(self, x: jax.Array) -> jax.Array:
        for layer in self.layers:
            x = layer(x)
        return x


def init_mlp(key: jax.Array, sizes: list[int], name: str) -> MLP:
    layers: list[Layer] = []
    keys = jax.random.split(key, len(sizes) - 1)
    for i, (k, n_in, n_out) in enumerate(zip(keys, sizes[:-1], sizes[1:], strict=True)):
        w = jax.random.normal(k, (n_in, n_out)) / jnp.sqrt(n_in)
        activation = "identity" if i == len(sizes) - 2 else "tanh"
        layers.append(Layer(w=w, b=jnp.zeros(n_out), activation=activation))
    return MLP(layers=layers, name=name)


traces = 0  # counts how often `forward` is traced, i.e. compiled


@jax.jit
def forward(model: MLP, x: jax.Array) -> jax.Array:
    global traces
    traces += 1
    return model(x)


def mse_loss(model: MLP, xs: jax.Array, ys: jax.Array) -> jax.Array:
    preds = jax.vmap(model)(xs)  # the model maps one input; vmap maps it over the batch
    return jnp.mean((preds - ys) ** 2)


def main() -> None:
    key_model, key_data = jax.random.split(jax.random.key(0))
    model = init_mlp(key_model, [3, 16, 1], name="tiny-mlp")
    print(f"1. built {model.name!r}: {len(jax.tree.leaves(model))} array leaves")
    for layer in model.layers:
        print(f"   Layer w{layer.w.shape} b{layer.b.shape} activation={layer.activation!r}")

    x = jnp.array([0.5, -1.0, 2.0])
    print(f"2. jitted forward: input {x.shape} -> output {forward(model, x).shape}")
    scaled = jdc.replace(model, layers=[jdc.replace(ly, w=2 * ly.w) for ly in model.layers])
    forward(scaled, x)
    print(f"   new weights, same static fields: traced {traces} time(s) in total")

    xs = jax.random.uniform(key_data, (64, 3), minval=-2.0, maxval=2.0)
    ys = jnp.sin(xs.sum(axis=1, keepdims=True))
    batched = jax.vmap(forward, in_axes=(None, 0))(model, xs)
    print(f"3. vmap over a batch: inputs {xs.shape} -> outputs {batched.shape}")

    loss, grads = jax.value_and_grad(mse_loss)(model, xs, ys)
    print(f"4. grad of the MSE loss has the model's type: {type(grads).__name__} {grads.name!r}")
    for g in grads.layers:
        print(f"   dL/dw {g.w.shape}, dL/db {g.b.shape}")

    learning_rate = 0.1
    model = jax.tree.map(lambda p, g: p - learning_rate * g, model, grads)
    new_loss = mse_loss(model, xs, ys)
    print(f"5. one SGD step (lr={learning_rate}): loss {loss:.4f} -> {new_loss:.4f}")
    if not new_loss < loss:
        raise RuntimeError("one SGD step should reduce the loss")

    relu = jdc.replace(model.layers[0], activation="relu")
    model = jdc.replace(model, layers=[relu, *model.layers[1:]], name="tiny-mlp-relu")
    y = forward(model, x)
    print(f"6. jdc.replace -> {model.name!r}, first layer {model.layers[0].activation!r}")
    print(f"   changed static fields recompile: output {y.shape}, traced {traces} time(s)")

    with jdc.copy_and_mutate(model) as surgery:
        surgery.layers[1].w = jnp.zeros_like(surgery.layers[1].w)  # same shape and dtype: ok
        try:
            surgery.layers[1].b = jnp.zeros(3)  # wrong shape: refused
        except jdc.MutationValidationError as error:
            print(f"7. copy_and_mutate refused a bad edit: {str(error).split('. ')[0]}")
    print(f"   zeroed the last w of a copy: {forward(surgery, x)}; original: {forward(model, x)}")


if __name__ == "__main__":
    main()
