import torch, ember, copy, time, statistics
from transformers import BertConfig, BertForMaskedLM
torch.manual_seed(0)
cfg = BertConfig(hidden_dropout_prob=0.0, attention_probs_dropout_prob=0.0)
m = BertForMaskedLM(cfg).cuda()
ids = torch.randint(0, cfg.vocab_size, (8, 128), device="cuda")
c = ember.compile(copy.deepcopy(m))
opt = torch.optim.SGD(c.parameters(), lr=1e-3, momentum=0.9)
def sync(): torch.cuda.synchronize()
for _ in range(3):
    out = c(input_ids=ids, labels=ids.clone()); out.loss.backward(); opt.step(); opt.zero_grad(set_to_none=True)
sync()
import cProfile, pstats, io
pr = cProfile.Profile(); pr.enable()
for _ in range(3):
    out = c(input_ids=ids, labels=ids.clone())
    sync()
    out.loss.backward(); opt.step(); opt.zero_grad(set_to_none=True)
pr.disable()
for key in ("tottime", "cumulative"):
    o = io.StringIO(); pstats.Stats(pr, stream=o).sort_stats(key).print_stats(18); print(o.getvalue()[:6000])
