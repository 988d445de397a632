/**
 * The peer of the orchestration benchmark (bench/peer.ts): the same six-stage pipeline on
 * LangGraph-JS, checkpointed to PostgreSQL by its own saver. Stages do nothing; a gate node
 * before merge interrupts the run until a decision is sent back (`Command({ resume })`).
 *
 * Loaded only by bench/peer.ts, after `npm install --prefix bench/peer` has put LangGraph in
 * bench/peer/node_modules: Warden itself never depends on it.
 */
import { Annotation, Command, END, interrupt, START, StateGraph } from '@langchain/langgraph';
import { PostgresSaver } from '@langchain/langgraph-checkpoint-postgres';
import pg from 'pg';
import type { CreatePeerPipeline } from '../peer-types';

const PipelineState = Annotation.Root({
  done: Annotation<string[]>({ reducer: (left, right) => left.concat(right), default: () => [] }),
  decision: Annotation<string>(),
});

export const createPeerPipeline: CreatePeerPipeline = async (connection, durability, onStageStart) => {
  const pool = new pg.Pool({ ...connection, max: 10 });
  // Its own schema in the benchmark's database: the checkpointer's tables stay apart from the ledger's.
  const saver = new PostgresSaver(pool, undefined, { schema: 'langgraph_peer' });
  await saver.setup();
  const stage = (name: string) => (_state: typeof PipelineState.State, config: { configurable?: { thread_id?: string } }) => {
    onStageStart(String(config.configurable?.thread_id), name);
    return { done: [name] };
  };
  const graph = new StateGraph(PipelineState)
    .addNode('triage', stage('triage'))
    .addNode('lld', stage('lld'))
    .addNode('spec', stage('spec'))
    .addNode('impl', stage('impl'))
    .addNode('review', stage('review'))
    // The human gate: the run stops here until someone answers.
    .addNode('gate', () => ({ decision: String(interrupt({ gate: 'merge', question: 'Merge?' })) }))
    .addNode('merge', stage('merge'))
    .addEdge(START, 'triage')
    .addEdge('triage', 'lld')
    .addEdge('lld', 'spec')
    .addEdge('spec', 'impl')
    .addEdge('impl', 'review')
    .addEdge('review', 'gate')
    .addConditionalEdges('gate', (state) => (state.decision === 'approve' ? 'merge' : END), ['merge', END])
    .addEdge('merge', END)
    .compile({ checkpointer: saver });

  return {
    async runToGate(threadId) {
      const result = await graph.invoke({ done: [] }, { configurable: { thread_id: threadId }, durability });
      const interrupts = (result as { __interrupt__?: unknown[] }).__interrupt__ ?? [];
      if (interrupts.length === 0) throw new Error(`${threadId} did not stop at the gate`);
    },
    async decide(threadId, decision) {
      const result = await graph.invoke(new Command({ resume: decision }), { configurable: { thread_id: threadId }, durability });
      return result.done;
    },
    async close() {
      await saver.end();
    },
  };
};
