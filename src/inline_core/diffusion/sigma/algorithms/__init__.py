"""The samplers, one generator each: `prediction = yield x, sigma` asks for one model call, so a
request's sampler advances one forward at a time inside a shared batch and keeps its history in
its own frame. After a call the sampler continues from `prediction.x` (a caller may have replaced
the point, as an inpaint blend does). Each follows k-diffusion/ComfyUI's published algorithm;
`registry` names them."""
