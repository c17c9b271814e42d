"""Known programs for the roofline tests: python roofline_programs.py BACKEND PROGRAM [STEPS].

PROGRAM: matmul (a[M,K] @ b[K,N], forward), conv (conv2d, no padding, no bias, forward), mlp (2 bias-free
linear layers + relu, MSE, backward, SGD). Their analytic FLOPs are in tests/test_roofline.py (ANALYTIC)."""
import sys

BACKEND, PROGRAM = sys.argv[1], sys.argv[2]
STEPS = int(sys.argv[3]) if len(sys.argv) > 3 else 5
M, K, N = 128, 256, 64  # matmul
B, CIN, COUT, HW, KS = 2, 4, 8, 10, 3  # conv
MB, D_IN, D_H, D_OUT = 256, 256, 512, 128  # mlp

if BACKEND == "torch_xla":
    import torch
    import torch_xla
    import torch_xla.core.xla_model as xm
    dev = torch_xla.device()
    torch.manual_seed(0)
    if PROGRAM == "matmul":
        a, b = torch.randn(M, K).to(dev), torch.randn(K, N).to(dev)
        for _ in range(STEPS):
            y = a @ b
            torch_xla.sync()
            xm.wait_device_ops()
    elif PROGRAM == "conv":
        x = torch.randn(B, CIN, HW, HW).to(dev)
        conv = torch.nn.Conv2d(CIN, COUT, KS, padding=0, bias=False).to(dev)
        for _ in range(STEPS):
            y = conv(x)
            torch_xla.sync()
            xm.wait_device_ops()
    else:
        model = torch.nn.Sequential(torch.nn.Linear(D_IN, D_H, bias=False), torch.nn.ReLU(),
                                    torch.nn.Linear(D_H, D_OUT, bias=False)).to(dev)
        opt = torch.optim.SGD(model.parameters(), lr=0.01)
        x, t = torch.randn(MB, D_IN).to(dev), torch.randn(MB, D_OUT).to(dev)
        for _ in range(STEPS):
            opt.zero_grad()
            loss = ((model(x) - t) ** 2).mean()
            loss.backward()
            opt.step()
            torch_xla.sync()
else:
    import jax
    import jax.numpy as jnp
    k = jax.random.PRNGKey(0)
    if PROGRAM == "matmul":
        a, b = jax.random.normal(k, (M, K)), jax.random.normal(k, (K, N))
        f = jax.jit(lambda a, b: a @ b)
        for _ in range(STEPS):
            jax.block_until_ready(f(a, b))
    elif PROGRAM == "conv":
        x, w = jax.random.normal(k, (B, CIN, HW, HW)), jax.random.normal(k, (COUT, CIN, KS, KS))
        f = jax.jit(lambda x, w: jax.lax.conv_general_dilated(x, w, (1, 1), "VALID"))
        for _ in range(STEPS):
            jax.block_until_ready(f(x, w))
    else:
        p = (jax.random.normal(k, (D_IN, D_H)), jax.random.normal(k, (D_H, D_OUT)))
        x, t = jax.random.normal(k, (MB, D_IN)), jax.random.normal(k, (MB, D_OUT))

        def loss(p, x, t):
            return jnp.mean((jax.nn.relu(x @ p[0]) @ p[1] - t) ** 2)

        @jax.jit
        def step(p, x, t):
            g = jax.grad(loss)(p, x, t)
            return tuple(w - 0.01 * d for w, d in zip(p, g))
        for _ in range(STEPS):
            p = jax.block_until_ready(step(p, x, t))

print(f"jax imported: {'jax' in sys.modules}")  # a torch_xla run's costs never start (or import) JAX
