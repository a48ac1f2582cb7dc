// The official openai npm client (6.x, Node 20), unchanged, against ilb's
// data plane: what services/ilb/npm_openai_test.go checks. Prints one
// JSON object with what each call returned.
//
//   ILB_BASE_URL=http://127.0.0.1:8080/v1 [ILB_SHED_URL=http://.../v1] node client.mjs
import OpenAI from 'openai';

const client = new OpenAI({ baseURL: process.env.ILB_BASE_URL, apiKey: 'unused', maxRetries: 0 });
const out = {};

// The fleet's models: the conversation below uses the last one listed (in
// ilb dev's example fleet, the model only some engines serve).
const models = await client.models.list();
out.models = models.data.map((m) => m.id);
const model = out.models[out.models.length - 1];
out.model = model;

// Three turns of one conversation, no id and no user: the engine of each.
const messages = [
  { role: 'system', content: 'You are a helpful assistant.' },
  { role: 'user', content: `what is a KV cache? (${process.pid})` },
];
out.turns = [];
for (let turn = 0; turn < 3; turn++) {
  const { data, response } = await client.chat.completions
    .create({ model, messages, max_tokens: 4 })
    .withResponse();
  out.turns.push({ engine: response.headers.get('x-ilb-engine'), chars: data.choices[0].message.content.length });
  messages.push({ role: 'assistant', content: data.choices[0].message.content });
  messages.push({ role: 'user', content: `and then? (${turn})` });
}

const stream = await client.chat.completions.create({ model, messages, max_tokens: 6, stream: true });
out.chatStream = { chunks: 0, chars: 0 };
for await (const chunk of stream) {
  out.chatStream.chunks++;
  out.chatStream.chars += (chunk.choices[0]?.delta?.content ?? '').length;
}

const completion = await client.completions.create({ model, prompt: 'Once upon a time', max_tokens: 4 });
out.completion = { object: completion.object, chars: completion.choices[0].text.length };

const cstream = await client.completions.create({ model, prompt: 'Once upon a time', max_tokens: 6, stream: true });
out.completionStream = { chunks: 0, chars: 0 };
for await (const chunk of cstream) {
  out.completionStream.chunks++;
  out.completionStream.chars += (chunk.choices[0]?.text ?? '').length;
}

const caught = async (call) => {
  try {
    await call();
    return null;
  } catch (e) {
    return { name: e.constructor.name, status: e.status, code: e.code, type: e.type, message: e.message,
      retryAfter: e.headers?.get?.('retry-after') ?? null };
  }
};
out.unknownModel = await caught(() => client.models.retrieve('no-such-model'));
out.unknownChat = await caught(() => client.chat.completions.create({ model: 'no-such-model', messages: [{ role: 'user', content: 'hi' }] }));
if (process.env.ILB_SHED_URL) {
  const shed = new OpenAI({ baseURL: process.env.ILB_SHED_URL, apiKey: 'unused', maxRetries: 0 });
  out.shed = await caught(() => shed.chat.completions.create({ model, messages: [{ role: 'user', content: 'hi' }] }));
}
console.log(JSON.stringify(out));
