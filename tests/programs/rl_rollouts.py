"""A policy-gradient agent trained in the manner of CleanRL's single-file scripts: vectorized
CartPole environments stepped on the CPU (the physics of Gym's CartPole, written here in NumPy),
a fixed-horizon rollout in which the policy picks each action (`Categorical(logits=...)`, its
sample read back with `.cpu().numpy()` to step the environments), then one update per rollout:
discounted returns, a value baseline, advantage normalization, the policy and value losses
with an entropy bonus, Adam and gradient clipping.

    python rl_rollouts.py --mode lazy|inductor|xlaprof

An expert reading its profile, run lazily: every environment step reads the action back from
the device, so each rollout runs as many small graphs as it has steps, the host waiting on
the device each time (a hidden sync at the action's read, inherent to a CPU environment: act
with a copy of the policy on the CPU, or step many more environments at once); the update's
graph is compiled once and reused, and Adam's state is made by the first update (warm-up,
once). Under torch.compile the policy compiles a graph for the rollout's calls under
`torch.no_grad()` and one for the update's: the second once, expected. One update is one step in
every mode.
"""
# expect[all]: steps 6
# expect[lazy]: HiddenSync @act_read | 32 a step
# expect[lazy]: LazyState @step_end
# expect[inductor,xlaprof]: Recompile @update_forward | expected once | no_grad
import argparse

import numpy as np
import torch
import torch.nn as nn

ap = argparse.ArgumentParser()
ap.add_argument("--mode", choices=["lazy", "inductor", "xlaprof"], default="lazy")
mode = ap.parse_args().mode

if mode == "lazy":
    import xlaprof.torch as xt

    device = xt.device()
else:
    device = torch.device("cpu")

num_envs, num_steps, updates, gamma, lr, ent_coef, vf_coef, max_grad_norm = 4, 32, 6, 0.99, 2.5e-3, 0.01, 0.5, 0.5


class CartPoles:
    """Gym's CartPole-v1 dynamics, `num_envs` at once, each reset when it falls."""

    def __init__(self, n, seed):
        self.rng = np.random.default_rng(seed)
        self.state = self.rng.uniform(-0.05, 0.05, (n, 4))

    def step(self, action):
        x, x_dot, theta, theta_dot = self.state.T
        force = np.where(action == 1, 10.0, -10.0)
        cos, sin = np.cos(theta), np.sin(theta)
        temp = (force + 0.05 * theta_dot**2 * sin) / 1.1
        theta_acc = (9.8 * sin - cos * temp) / (0.5 * (4.0 / 3.0 - 0.1 * cos**2 / 1.1))
        x_acc = temp - 0.05 * theta_acc * cos / 1.1
        self.state = np.stack([x + 0.02 * x_dot, x_dot + 0.02 * x_acc, theta + 0.02 * theta_dot,
                               theta_dot + 0.02 * theta_acc], axis=1)
        done = (np.abs(self.state[:, 0]) > 2.4) | (np.abs(self.state[:, 2]) > 0.2095)
        self.state[done] = self.rng.uniform(-0.05, 0.05, (int(done.sum()), 4))
        return self.state.astype(np.float32), np.ones(len(done), np.float32), done


class Agent(nn.Module):
    def __init__(self):
        super().__init__()
        self.critic = nn.Sequential(nn.Linear(4, 64), nn.Tanh(), nn.Linear(64, 1))
        self.actor = nn.Sequential(nn.Linear(4, 64), nn.Tanh(), nn.Linear(64, 2))

    def forward(self, obs):
        return self.actor(obs), self.critic(obs).squeeze(-1)


torch.manual_seed(0)
agent = Agent().to(device)
optimizer = torch.optim.Adam(agent.parameters(), lr=lr, eps=1e-5)
policy = agent if mode == "lazy" else torch.compile(agent, **({"backend": "xlaprof"} if mode == "xlaprof" else {}))
envs = CartPoles(num_envs, seed=1)
sampler = torch.Generator().manual_seed(2)

if __name__ == "__main__":
    obs = torch.from_numpy(envs.state.astype(np.float32))
    for update in range(updates):
        observations, actions, rewards, dones = [], [], [], []
        with torch.no_grad():
            for t in range(num_steps):
                logits, _ = policy(obs.to(device))
                probs = torch.softmax(logits, -1).cpu()  # act_read
                action = torch.multinomial(probs, 1, generator=sampler).squeeze(1)
                next_obs, reward, done = envs.step(action.numpy())
                observations.append(obs)
                actions.append(action)
                rewards.append(torch.from_numpy(reward))
                dones.append(torch.from_numpy(done.astype(np.float32)))
                obs = torch.from_numpy(next_obs)
        # the returns, discounted and cut at each episode's end, on the CPU where the rollout is
        returns, running = torch.zeros(num_steps, num_envs), torch.zeros(num_envs)
        for t in reversed(range(num_steps)):
            running = rewards[t] + gamma * running * (1.0 - dones[t])
            returns[t] = running
        b_obs = torch.stack(observations).reshape(-1, 4).to(device)
        b_actions = torch.stack(actions).reshape(-1).to(device)
        b_returns = returns.reshape(-1).to(device)
        logits, values = policy(b_obs)  # update_forward
        logprobs = torch.log_softmax(logits, -1)
        chosen = logprobs.gather(1, b_actions[:, None]).squeeze(1)
        advantages = b_returns - values.detach()
        advantages = (advantages - advantages.mean()) / (advantages.std() + 1e-8)
        entropy = -(logprobs.exp() * logprobs).sum(-1).mean()
        loss = -(chosen * advantages).mean() + vf_coef * ((values - b_returns) ** 2).mean() - ent_coef * entropy
        optimizer.zero_grad()
        loss.backward()
        nn.utils.clip_grad_norm_(agent.parameters(), max_grad_norm)
        optimizer.step()
        if mode == "lazy":
            xt.step()  # step_end
    print(f"trained {updates} updates, last loss {loss.item():.4f}")
