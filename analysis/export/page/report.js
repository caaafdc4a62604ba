(function(){'use strict';
var errs=document.getElementById('errors');
window.onerror=function(m,s,l){errs.textContent+='error: '+m+' (line '+l+')\n';};
var D=JSON.parse(document.getElementById('mt-data').textContent);
var NS='http://www.w3.org/2000/svg';
function el(t,a,p){var e=document.createElementNS(NS,t);for(var k in a)e.setAttribute(k,a[k]);if(p)p.appendChild(e);return e;}
function h(t,a,txt,p){var e=document.createElement(t);for(var k in a)e.setAttribute(k,a[k]);if(txt!=null)e.textContent=txt;if(p)p.appendChild(e);return e;}
function hb(b){var a=Math.abs(b),u=['B','KiB','MiB','GiB','TiB'],i=0;while(a>=1024&&i<4){a/=1024;i++;}return (b<0?'-':'')+(i?a.toFixed(a<10?2:a<100?1:0):a)+' '+u[i];}
function hue(s){var x=2166136261;for(var i=0;i<s.length;i++){x^=s.charCodeAt(i);x=Math.imul(x,16777619)>>>0;}return x;}
function col(s){var x=hue(s);return 'hsl('+(x%360)+',60%,'+(45+(x>>9)%20)+'%)';}
function secs(ms){return (ms/1000).toFixed(2)+' s';}
/* a table of rows (arrays of cells) under headers; cls per row */
function grid(box,id,heads,rows,cls){var t=h('table',{id:id},null,box),hd=h('tr',{},null,t);heads.forEach(function(c){h('th',{},c,hd);});
 rows.forEach(function(r,i){var tr=h('tr',{'class':cls?cls(i):''},null,t);r.forEach(function(v,k){h('td',k===r.length-1?{'class':'w',title:String(v)}:{},v,tr);});});return t;}

/* ---- a multi-process run: one row per process, as `memtally ranks` compares them ---- */
function summary(box){var S=D.summary;box.innerHTML='';if(!S)return;
 h('h2',{},'Processes',box);
 var outs=S.rows.filter(function(r){return r.out;});
 h('div',{'class':'verdict',id:'verdict'},outs.length?'Outlier'+(outs.length>1?'s':'')+': '+outs.map(function(r){return (r.rank>=0?'rank '+r.rank:r.label)+' ('+r.why+')';}).join(', '):
  (S.compared>1?'no '+(S.rows.some(function(r){return r.rank>=0;})?'rank':'process')+' stands out':'one process compared: no comparison'),box);
 var t=grid(box,'procs',['process','rank','peak heap','peak mmap','peak dev','held','peak rss','growth','','command'],
  S.rows.map(function(r){return [r.label,r.rank>=0?r.rank:'-',hb(r.heap),hb(r.mmap),hb(r.dev),hb(r.held),hb(r.rss),r.compared?r.growth:'-',
   r.out?'outlier: '+r.why:r.compared?'':'not compared',r.argv.length>72?r.argv.slice(0,69)+'...':r.argv];}),
  function(i){var r=S.rows[i];return 'proc'+(r.out?' outlier':'')+(r.compared?'':' other');});
 t.querySelectorAll('tr.proc').forEach(function(tr,i){tr.setAttribute('data-p',S.rows[i].p);tr.addEventListener('click',function(){sel.value=S.rows[i].p;show(null);
  document.getElementById('detail').scrollIntoView();});});
 h('div',{'class':'note'},'Growth on '+S.window+'; held: live heap and mmap at the window\'s end, before teardown. '+
  (S.skipped?S.skipped+' process'+(S.skipped>1?'es':'')+' without a rank (the launcher) not compared. ':'')+
  'An outlier\'s growth, held bytes or peak RSS is far from the others\' (memtally ranks). Click a row for its detail below.',box);}

function timeline(p,box){box.innerHTML='';var S=p.snapshots,W=1100,H=260,L=70,B=30;
 var svg=el('svg',{width:W,height:H+40,'class':'timeline'},box);var series=[];
 ['rss','pss','heap','mmap','mmap_file','cgroup'].forEach(function(k){if(S[k]&&S[k].some(function(v){return v!=null;}))series.push([k,S[k],COLS[k]]);});
 Object.keys(S.dev||{}).forEach(function(d,i){series.push(['cuda dev '+d,S.dev[d],['#17becf','#bcbd22','#8c564b','#e377c2'][i%4]]);});
 var tmax=Math.max(1,S.t[S.t.length-1]||1),vmax=1,cg=null;
 series=series.filter(function(s){if(s[0]!=='cgroup')return true;cg=s;return false;});
 series.forEach(function(s){s[1].forEach(function(v){if(v>vmax)vmax=v;});});
 var cgmax=cg?Math.max.apply(null,cg[1].filter(function(v){return v!=null;})):0;
 if(cg&&cgmax<=4*vmax){series.push(cg);vmax=Math.max(vmax,cgmax);}
 else if(cg)h('div',{'class':'note'},'cgroup usage (up to '+hb(cgmax)+', the whole group) is left off the chart to keep the process readable.',box);
 function X(t){return L+(W-L-10)*t/tmax;}function Y(v){return H-B-(H-B-10)*v/vmax;}
 el('line',{x1:L,y1:H-B,x2:W-10,y2:H-B,stroke:'#999'},svg);el('line',{x1:L,y1:10,x2:L,y2:H-B,stroke:'#999'},svg);
 for(var i=0;i<=4;i++){var v=vmax*i/4;el('text',{x:2,y:Y(v)+4},svg).textContent=hb(v);}
 el('text',{x:W-120,y:H-8},svg).textContent=(tmax/1000).toFixed(1)+' s';
 series.forEach(function(s){var pts=[];s[1].forEach(function(v,i){if(v!=null)pts.push(X(S.t[i])+','+Y(v));});
  el('polyline',{points:pts.join(' '),fill:'none',stroke:s[2],'stroke-width':1.5,'class':'series','data-name':s[0]},svg);
  if(pts.length<=60)pts.forEach(function(q){var c=q.split(',');el('circle',{cx:c[0],cy:c[1],r:2.5,fill:s[2]},svg);});});
 /* the program's phases: bands behind the lines, a row of them under the axis */
 var PC=['#fdd0a2','#c6dbef','#c7e9c0','#dadaeb','#fcbba1','#d9d9d9'],pn=[];
 (p.phases||[]).forEach(function(q){var k=pn.indexOf(q[0]);if(k<0){k=pn.length;pn.push(q[0]);}
  var r=el('rect',{x:X(q[1]),y:10,width:Math.max(1,X(q[2])-X(q[1])),height:H-B-10,fill:PC[k%PC.length],'fill-opacity':0.5,'class':'phase','data-phase':q[0]},svg);
  svg.insertBefore(r,svg.firstChild);
  el('title',{},r).textContent=q[0]+' '+((q[2]-q[1])/1000).toFixed(2)+' s'+(q[3]!=null?' at step '+q[3]:'');});
 var RC={exit:'#000',signal:'#d62728',request:'#1f77b4',every:'#7f7f7f',interval:'#c7c7c7',preoom:'#ff7f0e',oom:'#ff0000'};
 S.t.forEach(function(t,i){var m=el('line',{x1:X(t),x2:X(t),y1:H-B,y2:H-B+6,stroke:RC[S.reason[i]]||'#aaa','class':'tick'},svg);
  var tt=el('title',{},m);tt.textContent='snapshot '+S.seq[i]+': '+S.reason[i]+' at '+(t/1000).toFixed(2)+' s'+(S.label[i]?' ('+S.label[i]+')':'')+(S.mark[i]!=null?' step '+S.mark[i]:'');});
 /* the moment the table shows */
 var mk=el('line',{x1:L,x2:L,y1:10,y2:H-B,stroke:'#444','stroke-dasharray':'2,3','class':'moment',visibility:'hidden'},svg);
 box.momentAt=function(t){if(t==null){mk.setAttribute('visibility','hidden');return;}mk.setAttribute('x1',X(t));mk.setAttribute('x2',X(t));mk.setAttribute('visibility','visible');};
 var lg=h('div',{'class':'legend'},null,box);series.forEach(function(s){var sp=h('span',{},null,lg);h('i',{style:'background:'+s[2]},null,sp);sp.appendChild(document.createTextNode(s[0]));});
 pn.forEach(function(n,k){var sp=h('span',{'class':'phase-key'},null,lg);h('i',{style:'background:'+PC[k%PC.length]},null,sp);sp.appendChild(document.createTextNode(n));});
 if(p.downsampled)h('div',{'class':'note'},'Showing '+S.t.length+' of '+p.nsnaps+' snapshots (evenly spaced; the first, the last and the peak kept).',box);
 if(p.marks_start)h('div',{'class':'note'},p.marks_start,box);}
var COLS={rss:'#d62728',pss:'#ff9896',heap:'#1f77b4',mmap:'#2ca02c',mmap_file:'#98df8a',cgroup:'#9467bd'};

function stacked(p,box){box.innerHTML='';var K=p.stack;if(!K||!K.sites.length)return;var S=p.snapshots,W=1100,H=300,L=70,B=30,n=S.t.length;
 var steps=S.mark.length&&S.mark.every(function(v){return v!=null;})&&S.mark[n-1]>S.mark[0];
 var xs=steps?S.mark:S.t,x0=xs[0],x1=Math.max(xs[n-1],x0+1),tot=[],vmax=1;
 for(var i=0;i<n;i++){var t=0;K.sites.forEach(function(s){t+=s.y[i];});tot.push(t);if(t>vmax)vmax=t;}
 function X(v){return L+(W-L-10)*(v-x0)/(x1-x0);}function Y(v){return H-B-(H-B-10)*v/vmax;}
 var svg=el('svg',{width:W,height:H+10,'class':'stacked'},box),base=new Array(n).fill(0);
 var tip=h('div',{'class':'note',id:'stacked-tip'},'\u00a0',box),stk=h('pre',{'class':'stack',id:'stacked-stack'},null,box);
 K.sites.forEach(function(s,k){var top=[],bot=[];for(var i=0;i<n;i++){top.push(X(xs[i])+','+Y(base[i]+s.y[i]));bot.unshift(X(xs[i])+','+Y(base[i]));base[i]+=s.y[i];}
  var other=s.where==='other',c=other?'#ccc':col(s.where);
  var poly=el('polygon',{points:top.concat(bot).join(' '),fill:c,'fill-opacity':0.8,stroke:s.suspect?'#d62728':'#fff','stroke-width':s.suspect?2:0.5,'class':'band'+(s.suspect?' suspect':''),'data-where':s.where},svg);
  var last=s.y[n-1],peak=Math.max.apply(null,s.y);
  el('title',{},poly).textContent=s.where+(s.kind?' ['+s.kind+']':'')+': '+hb(last)+' at the end, '+hb(peak)+' at most'+(s.suspect?' (leak suspect)':'');
  poly.addEventListener('mousemove',function(ev){var r=svg.getBoundingClientRect(),v=x0+(ev.clientX-r.left-L)/(W-L-10)*(x1-x0),i=0;while(i<n-1&&xs[i+1]<=v)i++;
   tip.textContent=s.where+(s.kind?' ['+s.kind+']':'')+': '+hb(s.y[i])+' at '+(steps?'step '+xs[i]:(xs[i]/1000).toFixed(2)+' s')+(s.suspect?' (leak suspect)':'');});
  poly.addEventListener('click',function(){stk.textContent=s.where+'\n'+(s.frames.length?s.frames.join('\n'):'(the rest of the call sites)');});});
 el('line',{x1:L,y1:H-B,x2:W-10,y2:H-B,stroke:'#999'},svg);el('line',{x1:L,y1:10,x2:L,y2:H-B,stroke:'#999'},svg);
 for(var q=0;q<=4;q++){var v=vmax*q/4;el('text',{x:2,y:Y(v)+4},svg).textContent=hb(v);}
 el('text',{x:W-160,y:H-8},svg).textContent=steps?'step '+x1:(x1/1000).toFixed(1)+' s';
 if(p.growth_step!=null&&steps){var gx=X(p.growth_step);el('line',{x1:gx,x2:gx,y1:10,y2:H-B,stroke:'#d62728','stroke-dasharray':'4,3','class':'growth-start'},svg);
  el('text',{x:gx+4,y:22,fill:'#d62728'},svg).textContent='growth starts at step '+p.growth_step;}
 var lg=h('div',{'class':'legend'},null,box);K.sites.forEach(function(s){var sp=h('span',{},null,lg);h('i',{style:'background:'+(s.where==='other'?'#ccc':col(s.where))},null,sp);sp.appendChild(document.createTextNode((s.suspect?'\u26a0 ':'')+s.where));});}

function named(w,n){return n>1?w+' ['+n+' sites]':w;}
/* leak suspects as `memtally leaks` ranks them; spikes as `memtally report` lists them */
function findings(p,box){box.innerHTML='';var L=p.leaks;
 if(!L||L.points<3)h('p',{'class':'note'},'Leaks: too few snapshots after start-up and before teardown to judge growth (take snapshots with MEMTALLY_INTERVAL, MEMTALLY_EVERY or MEMTALLY_STEPS).',box);
 else if(!L.suspects.length)h('p',{'class':'note',id:'no-leaks'},'No leak suspect: nothing grows steadily ('+L.examined+' rows examined, '+L.window+').',box);
 else{h('div',{'class':'note'},'Leak suspects, fastest first ('+L.examined+' rows examined, '+L.window+'), as memtally leaks ranks them:',box);
  grid(box,'leaks',['#','growth','per step','fit','share','live','kind','where'],L.suspects.map(function(s,i){return [i+1,s.growth,s.per_step,s.fit.toFixed(2),(100*s.share).toFixed(1)+'%',hb(s.live),s.k,named(s.w,s.sites)+(s.kept?' \u2014 kept alive by: '+s.kept:s.unkept?' \u2014 no chain: '+s.unkept:'')];}),function(){return 'suspect';});
  if(L.more)h('div',{'class':'note'},'and '+L.more+' more (memtally leaks --top N).',box);}
 if(!p.spikes.length){h('p',{'class':'note',id:'no-spikes'},'No spike: no call site\'s own high-water mark is twice, and 4 MiB over, what it held at the peak.',box);return;}
 h('div',{'class':'note'},'Spikes: a call site\'s own high-water mark, far above what it held at the process peak (memory the peak tables miss):',box);
 grid(box,'spikes',['own peak','at peak','when','kind','where'],p.spikes.map(function(s){return [hb(s.peak),hb(s.live),(s.ms==null?'?':(s.step!=null?'step '+s.step+' ('+secs(s.ms)+')':secs(s.ms)))+(s.ph?' '+s.ph:''),s.k,named(s.w,s.sites)];}),function(){return 'spike';});}

function flame(p,box){box.innerHTML=p.flame;var s=box.querySelector('svg');if(s)mtFlameInit(s);
 document.getElementById('flame-note').textContent='Live memory by call site '+p.flame_moment+' (it stays there when the table below moves: one flame graph a process keeps the page small). Click a frame to zoom; Search highlights.';}

/* the call-site table at a moment: the peak first, then the snapshots the control moves through */
var cur=null;
function table(p,box,ctl,want){box.innerHTML='';ctl.innerHTML='';var T=p.tables;if(!T.length){h('p',{'class':'note'},'No snapshot.',box);return;}
 var snaps=[];for(var i=1;i<T.length;i++)snaps.push(i);
 var bar=h('div',{'class':'moment'},null,ctl),pk=h('button',{id:'at-peak',type:'button'},T[0].name.replace(/^at /,''),bar);
 var sl=snaps.length?h('input',{type:'range',id:'snap',min:0,max:snaps.length-1,step:1,value:snaps.length-1,'aria-label':'snapshot'},null,bar):null;
 var lab=h('span',{id:'moment-label'},null,bar);
 var q=h('input',{type:'search',placeholder:'filter rows',id:'filter'},null,box);
 var t=h('table',{id:'sites'},null,box),hd=h('tr',{},null,t),body=h('tbody',{},null,t),foot=h('div',{'class':'note',id:'table-note'},null,box);
 var cols=[['live','live'],['c2','count'],['allocs','allocs'],['abytes','allocated'],['kind','kind'],['where','where']],key='live',dir=-1,rows=[],ths=[];
 cols.forEach(function(c){var th=h('th',{},c[1],hd);ths.push(th);th.addEventListener('click',function(){if(key===c[0])dir=-dir;else{key=c[0];dir=-1;}draw();});});
 function draw(){rows.sort(function(a,b){var x=a[key],y=b[key];return (x<y?-1:x>y?1:0)*dir;});body.innerHTML='';var f=q.value.toLowerCase(),ex=T[cur].exact;
  rows.forEach(function(r){if(f&&r.where.toLowerCase().indexOf(f)<0&&r.frames.join(' ').toLowerCase().indexOf(f)<0)return;
   var tr=h('tr',{'class':'site'},null,body);[hb(r.live),ex?hb(r.c2):r.c2,r.allocs,hb(r.abytes),r.kind].forEach(function(v){h('td',{},v,tr);});
   h('td',{'class':'w',title:r.where},r.where,tr);var st=null;tr.addEventListener('click',function(){if(st){st.remove();st=null;return;}
   st=document.createElement('tr');st.className='stack';h('td',{colspan:6},r.frames.join('\n'),st);tr.after(st);});});}
 function set(i){var m=T[i];cur=i;pk.className=i===0?'on':'';if(sl){sl.className=i===0?'off':'';if(i>0)sl.value=snaps.indexOf(i);}
  rows=m.r.map(function(x){var R=p.rows[x[0]];return {live:x[1],c2:x[2],allocs:x[3],abytes:x[4],kind:R.k,where:named(R.w,x[5]),
   frames:R.f.map(function(k){return p.frames[k];})};});
  ths[0].textContent=m.exact?'at peak':'live';ths[1].textContent=m.exact?'live at end':'count';
  lab.textContent=m.seq==null?m.name+' (exact: each call site\'s bytes when its kind was at its high-water mark)':
   'at snapshot '+m.seq+' ('+m.reason+', '+secs(m.t)+(m.step!=null?', step '+m.step:'')+')';
  foot.textContent=m.rows+' rows hold '+hb(m.total)+' '+(m.seq==null?m.name:'then')+(m.r.length<m.rows?'; the '+m.r.length+' largest shown, the rest hold '+hb(m.rest):'')+
   '. Rows are call sites grouped by the line they are named by (the user\'s Python line, or the first native frame outside the allocator), as memtally report names them; allocs and allocated count to this moment'+(m.exact?' (at the peak: to the end)':'')+'. The table moves through '+snaps.length+' of '+p.nsnaps+' snapshots.';
  var tl=document.getElementById('timeline');if(tl.momentAt)tl.momentAt(m.t);
  key=m.exact||key==='live'?'live':key;draw();hash();}
 pk.addEventListener('click',function(){set(0);});
 if(sl)sl.addEventListener('input',function(){set(snaps[+sl.value]);});
 q.addEventListener('input',draw);
 var at=0;if(want!=null&&want!=='peak')T.forEach(function(m,i){if(i&&String(m.seq)===String(want))at=i;});
 set(at);}

function dumps(box){box.innerHTML='';if(!D.dumps.length){h('p',{'class':'note'},'No OOM dumps in this run.',box);return;}
 D.dumps.forEach(function(d){h('h3',{},d.title,box);h('div',{'class':'note'},d.what,box);
  var segs=d.segments,tot=segs.reduce(function(a,s){return a+s.size;},0)||1,W=1100;
  var devs={};segs.forEach(function(s){(devs[s.dev]=devs[s.dev]||[]).push(s);});
  Object.keys(devs).forEach(function(dv){var list=devs[dv].sort(function(a,b){return a.addr<b.addr?-1:1;});
   var sum=list.reduce(function(a,s){return a+s.size;},0)||1;h('div',{'class':'note'},(dv<0?'host':'device '+dv)+': '+list.length+' segments, '+hb(sum)+' (address order; widths by size)',box);
   var svg=el('svg',{width:W,height:34,'class':'segmap'},box),x=0;list.forEach(function(s){var w=Math.max(0.5,(W-2)*s.size/sum);
    var r=el('rect',{x:x,y:2,width:w,height:28,fill:col(s.fn),'class':'seg'},svg);el('title',{},r).textContent=s.fn+' '+hb(s.size)+' at '+s.addr+(s.mapped?' (mapped)':'');x+=w;});});
  var fns={};segs.forEach(function(s){fns[s.fn]=(fns[s.fn]||0)+s.size;});var lg=h('div',{'class':'legend'},null,box);
  Object.keys(fns).sort(function(a,b){return fns[b]-fns[a];}).slice(0,12).forEach(function(f){var sp=h('span',{},null,lg);h('i',{style:'background:'+col(f)},null,sp);sp.appendChild(document.createTextNode(f+' '+hb(fns[f])));});
  var ev=d.events;if(!ev.length)return;var H=160,L=70,cur=0,pts=[],mx=1,t0=ev[0].t,t1=Math.max(ev[ev.length-1].t,t0+1);
  ev.forEach(function(e){if(e.op==='alloc')cur+=e.size;else if(e.op==='free')cur-=e.size;pts.push([e.t,cur]);if(cur>mx)mx=cur;});
  var svg2=el('svg',{width:W,height:H+20,'class':'events'},box);function X(t){return L+(W-L-10)*(t-t0)/(t1-t0);}function Y(v){return H-10-(H-20)*v/mx;}
  el('polyline',{points:pts.map(function(p){return X(p[0])+','+Y(p[1]);}).join(' '),fill:'none',stroke:'#1f77b4'},svg2);
  ev.forEach(function(e){if(e.op==='oom'){var c=el('circle',{cx:X(e.t),cy:10,r:5,fill:'red','class':'oomev'},svg2);el('title',{},c).textContent='OOM: '+hb(e.size)+' requested';}});
  el('text',{x:2,y:14},svg2).textContent='+'+hb(mx);el('text',{x:L,y:H+14},svg2).textContent='the last '+ev.length+' events (window: '+((t1-t0)/1000).toFixed(2)+' s), live bytes they add up to';});}

/* where the page is: #p=<process>&s=<snapshot seq, or peak> (a link to a moment) */
function where(){var o={};location.hash.replace(/^#/,'').split('&').forEach(function(kv){var i=kv.indexOf('=');if(i>0)o[kv.slice(0,i)]=decodeURIComponent(kv.slice(i+1));});return o;}
function hash(){var p=D.processes[+sel.value||0],m=p&&cur!=null?p.tables[cur]:null;var s='#p='+(+sel.value||0)+'&s='+(m&&m.seq!=null?m.seq:'peak');
 if(location.hash!==s)try{history.replaceState(null,'',s);}catch(e){/* a page opened where history is not writable: the link is not kept */}}
var sel=document.getElementById('proc');D.processes.forEach(function(p,i){h('option',{value:i},p.label+'  '+p.argv,sel);});
function show(want){var p=D.processes[+sel.value||0];if(!p)return;var t0=performance.now();
 document.getElementById('detail').textContent=D.processes.length>1?'Process '+p.label:'Process';
 timeline(p,document.getElementById('timeline'));stacked(p,document.getElementById('stacked'));findings(p,document.getElementById('findings'));
 flame(p,document.getElementById('flame'));table(p,document.getElementById('table'),document.getElementById('moment'),want);
 if(D.summary)document.querySelectorAll('#procs tr.proc').forEach(function(tr){tr.classList.toggle('shown',tr.getAttribute('data-p')===sel.value);});
 document.body.setAttribute('data-render-ms',(performance.now()-t0).toFixed(1));} /* measured by test_pictures */
sel.addEventListener('change',function(){show(null);});
var W0=where();sel.value=W0.p!=null&&D.processes[+W0.p]?+W0.p:D.summary?D.summary.open:0;
if(D.processes.length<2)sel.style.display='none';
summary(document.getElementById('summary'));show(W0.s);dumps(document.getElementById('dumps'));
window.addEventListener('hashchange',function(){var w=where();if(w.p!=null&&D.processes[+w.p])sel.value=+w.p;show(w.s);});
document.body.setAttribute('data-ready','1');})();
